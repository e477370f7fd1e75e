"""Integrations with other libraries: Lightning (`lightning`) and a map-style Dataset
adapter (`adapter`). Each imports its library only when used."""
