//! Exports of a run for other tools: Chrome/Perfetto trace JSON today; SVG/PNG
//! figures are the next step (issue 7). Pure functions of a `Run`; never prints.

pub mod chrome;
