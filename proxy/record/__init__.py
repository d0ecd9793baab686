"""Record and replay: cassettes of real agent traffic, answered back byte- and timing-accurate under faults."""
