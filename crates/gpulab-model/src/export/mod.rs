//! Exports of a run for other tools: Chrome/Perfetto trace JSON, and SVG/PNG
//! figures for slides, and a page to share. Each reads a recording twice, event
//! by event (`outline` first, for its time axis and header), and never holds it
//! whole: the trace writes events as they are read, the figures and the page draw
//! a `Run` and the recording's lanes decimated to their width (`decimate`).
//! Never prints.

pub mod chrome;
mod decimate;
pub mod figure;
pub mod html;
mod outline;
mod program;
mod svg;

pub(crate) use svg::esc;
