"""The cluster agent (`mcd start`): its wiring to the executor and host layer."""
