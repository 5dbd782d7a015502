"""Dependents: the roles' API proxy, ownership of what roles write, dependent watches, and the
routing policy that ties them to the controllers."""
