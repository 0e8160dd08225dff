"""The process: guarded threads and signal flags, shared by the agent and the pool controller."""
