"""Integrations with other libraries: Lightning (`lightning`) and a map-style Dataset
adapter (`adapter`). Each imports its library only when used. Ray Train's ranks are read
with the other rank sources (`torch_bridge.order.ray_ranks`)."""
