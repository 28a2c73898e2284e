"""Concrete implementations of the ports (devices, engines, stores, services); only the composition root imports them."""
