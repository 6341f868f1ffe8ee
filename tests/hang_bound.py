"""The one time-out of a test's subprocess (``vnr``, ``python -m harness``, a script, a browser).

It bounds a hang only, never decides an outcome: a command that takes 30 s alone can take minutes on a loaded
2-core machine, so a tight bound made tests fail by timing (issue #37). Generous on purpose; it costs nothing
when the command ends in time.
"""

HANG_S = 900
