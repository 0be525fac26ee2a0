"""How a blocked call learns to look again, without polling Redis in a loop.

Scripts that change a resource publish on its shard channel. Per process, each
channel with local waiters has one *listener*: one subscription and one task,
however many calls wait on it (listener.py holds that skeleton). Two kinds:

- waiters.py: a grant named for one caller (locks, semaphores): the message names
  the token it is for, and a poll script finds grants a lost message did not bring;
- doorbells.py: nothing named (task queues: whoever claims first; chat and files:
  everyone wants every message): a message rings waiters, who look for themselves.
"""
