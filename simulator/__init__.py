"""The deterministic simulator (docs/simulator.md). The names of its workloads are here, so
that the command line knows them without loading the simulator."""
WORKLOAD_NAMES = ("register", "queue")
DEFAULT_WORKLOAD = "register"
