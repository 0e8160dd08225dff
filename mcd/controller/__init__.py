"""`mcd pool-controller`: renders each MachineConfigPool's configs and rolls its nodes onto them,
answering the drain handshake, for clusters without the Machine Config Operator."""
