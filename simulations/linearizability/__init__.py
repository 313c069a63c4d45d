"""The protocol-free linearizability library: histories, models, the checker and its pictures."""
