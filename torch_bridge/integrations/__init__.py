"""Integrations with other libraries: Lightning (`lightning`), a map-style Dataset adapter
(`adapter`) and Ray Train's ranks (`ray`). Each imports its library only when used (`ray`
never: it reads an already imported `ray.train`)."""
