"""The interfaces between the core and the outside world: one module per external thing.

The core imports only these; adapters (toy_runtime/adapters) implement them and fakes (toy_runtime/fakes)
implement them in memory. Only the composition root (toy_runtime/app/) picks adapters.
"""
