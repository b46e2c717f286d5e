//! Run model (in progress).
