//! Telemetry (in progress).
