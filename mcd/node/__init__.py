"""The node model: annotations and states, the update decision, MachineConfigNode conditions and
the drain rules, as pure functions shared by the agent and the pool controller."""
