"""The recorded-history fault campaign (``make chaos``; a short form runs in ``make test``).

- history.py:   the recorder, an append-only list of every call (invocation, completion,
                result or status code + ErrorInfo reason) and of every streamed message;
- checker.py:   pure functions over a history, one per guarantee, each returning the
                violations it found (with the events that show them);
- faults.py:    the seeded fault schedule and the processes it is executed against;
- workloads.py: one driver per service, through the real Python client;
- campaign.py:  workloads + faults for a while, then quiesce, final reads and the check.
"""
