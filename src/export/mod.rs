//! Exports of a run for other tools: Chrome/Perfetto trace JSON, and SVG/PNG
//! figures for slides. Pure functions of a `Run`; never prints.

pub mod chrome;
pub mod figure;
