//! Run source (in progress).
