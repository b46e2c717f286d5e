//! Exports of a run for other tools: Chrome/Perfetto trace JSON, and SVG/PNG
//! figures for slides, and a page to share. Pure functions of a `Run`; never prints.

pub mod chrome;
pub mod figure;
pub mod html;
mod svg;
