"""mcd: a node agent that applies MachineConfigs, compatible with the Machine Config Daemon."""

__version__ = "0.1.0"
