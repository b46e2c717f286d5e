//! Exports of a run for other tools: Chrome/Perfetto trace JSON, and SVG/PNG
//! figures for slides, and a page to share. Figures and the page are pure functions
//! of a `Run`; the trace is written from the recording's events as they are read.
//! Never prints.

pub mod chrome;
pub mod figure;
pub mod html;
mod svg;
