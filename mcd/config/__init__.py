"""Config layer: parse and validate MachineConfigs and Ignition configs. Pure: no I/O."""
