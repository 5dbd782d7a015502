"""The patches of ansible-core (and a few other packages) the warm executor installs."""
