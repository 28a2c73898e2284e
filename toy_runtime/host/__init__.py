"""The one door for turns that do not come from the child's voice (design 004, host event envelope).

- `envelope.py`: HostEvent, Binding and the router; the runtime holds ONE router (`Runtime.router`) and every command
  registers its runners on it.
- `commands.py`: the runner of `api.invoked` commands (remote and console): granted names only, reply on the
  envelope's delivery surface.
- `firmware.py`: what the firmware sends — the talk button and remote commands (`api.invoked`, granted names only).
- `scheduler.py`: the reminder scheduler, firing `schedule.triggered` host events through the router.
- `reminders.py`: how a reminder is put into words.

Starting the MQTT link imports an adapter, so it stays with the composition root (`app/firmware_link.py`).
"""
