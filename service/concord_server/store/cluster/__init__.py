"""Redis Cluster (--redis-cluster): command routing to each slot's primary
(commands.py) and pub/sub routing to each channel's node (bus.py)."""

from .bus import ClusterBus
from .commands import ClusterCommands

__all__ = ["ClusterBus", "ClusterCommands"]
