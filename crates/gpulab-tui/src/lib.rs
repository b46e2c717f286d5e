//! The dashboard: app state fed by channels (input, run events, samples, a frame
//! tick), one widget per panel drawn purely from that state, and a loop generic
//! over ratatui's `Backend`. Never calls a GPU API: runs go through the run
//! source, and what this machine can run is asked of a `gpulab doctor` child.

pub mod app;
pub mod color;
pub mod event_loop;
pub mod in_flight;
pub mod keys;
pub mod layout;
pub mod panels;
pub mod playback;
pub mod recordings;
pub mod runstate;
pub mod screen;
pub mod terminal;
pub mod theme;

// The names the code has always used for the crates below this one.
use gpulab_events::units;
use gpulab_host::clock;
use gpulab_lab as lab;
use gpulab_model::{report, run, teaching, text, trace, verdict};
use gpulab_source as source;
use gpulab_source::{history, signals};

pub use app::{App, Cmd, Msg};
pub use screen::Dashboard;
pub use theme::Theme;
