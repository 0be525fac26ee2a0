"""Other systems the bench measures Concord against on the same machine, in the same
run (the peer arena): their installers, pinned versions and client programs. Every
one is installed by the scenario that uses it, from the package registries only."""
