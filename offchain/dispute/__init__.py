"""The dispute: one bisection engine (engine.py) played at five levels (level1_steps ..
level5_primitive), refereed off chain by the client (referee.py). docs/PROTOCOL.md §6-7."""
