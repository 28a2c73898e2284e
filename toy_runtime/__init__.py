"""toy-runtime: the on-device runtime of a talking toy (listen → think → speak, with concurrent device events)."""

__version__ = "0.1.0"
