//! Every key of the dashboard in one table. Key handling, the `?` overlay and the
//! status bar's hints all read it, so a hint never drifts from its binding.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What a key asks for; the app state machine decides what that means right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    Up,
    Down,
    Filter,
    Run,
    Step,
    Cancel,
    NextVariant,
    PrevVariant,
    Params,
    Compare,
    FocusNext,
    FocusPrev,
    PageUp,
    PageDown,
    /// Parameter editor: smaller / larger value.
    Less,
    More,
    /// Parameter editor: back to the lab's default.
    Reset,
    /// Record the lab's next run to a file.
    Record,
    /// Open the selected lab's recording (its chosen variant's) in replay.
    OpenRecording,
    /// The focused panel fills the screen, or the layout comes back.
    Zoom,
    /// Mouse capture off (the terminal selects and copies text) or back on.
    Mouse,
    /// A watched job: the objects and findings panels show the next rank
    /// alone, then every rank again.
    NextRank,
    /// Class mode on or off: predict each claim before the run (its digit,
    /// taken before this table), the lesson hidden until then.
    ClassMode,
    /// A lesson (`--lesson`): its next step (`<`, the previous one, is
    /// taken before this table, as class mode's digits are).
    NextStep,
    /// Replay: play or pause (at the end: play from the start).
    PlayPause,
    /// Replay: a second back / forward.
    ScrubBack,
    ScrubForward,
    /// Replay: one call back / forward.
    CallBack,
    CallForward,
    /// Replay: the start / the whole run.
    First,
    Last,
    Slower,
    Faster,
}

/// Where a key applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Main,
    /// Typing a filter for the labs list: printable keys are text.
    Filter,
    /// The parameter editor: digits are text.
    Params,
    /// A recording is shown: its keys first, then the dashboard's.
    Replay,
}

impl Mode {
    pub fn title(self) -> &'static str {
        match self {
            Mode::Main => "dashboard",
            Mode::Filter => "filter (after /)",
            Mode::Params => "parameters (after p)",
            Mode::Replay => "replay (a recording is shown; the dashboard's keys work too)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum K {
    Char(char),
    Ctrl(char),
    Enter,
    Esc,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Tab,
    BackTab,
    Home,
    End,
    /// A function key, `F(1)` for F1.
    F(u8),
}

impl K {
    pub fn label(self) -> String {
        match self {
            K::Char(' ') => "Space".into(),
            K::Char(c) => c.to_string(),
            K::Ctrl(c) => format!("Ctrl-{}", c.to_ascii_uppercase()),
            K::Enter => "Enter".into(),
            K::Esc => "Esc".into(),
            K::Up => "↑".into(),
            K::Down => "↓".into(),
            K::Left => "←".into(),
            K::Right => "→".into(),
            K::PageUp => "PgUp".into(),
            K::PageDown => "PgDn".into(),
            K::Tab => "Tab".into(),
            K::BackTab => "Shift-Tab".into(),
            K::Home => "Home".into(),
            K::End => "End".into(),
            K::F(n) => format!("F{n}"),
        }
    }

    fn matches(self, ev: &KeyEvent) -> bool {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        match (self, ev.code) {
            (K::Ctrl(c), KeyCode::Char(x)) => ctrl && x.eq_ignore_ascii_case(&c),
            (K::Char(c), KeyCode::Char(x)) => !ctrl && x == c,
            (K::Enter, KeyCode::Enter) => true,
            (K::Esc, KeyCode::Esc) => true,
            (K::Up, KeyCode::Up) => true,
            (K::Down, KeyCode::Down) => true,
            (K::Left, KeyCode::Left) => true,
            (K::Right, KeyCode::Right) => true,
            (K::PageUp, KeyCode::PageUp) => true,
            (K::PageDown, KeyCode::PageDown) => true,
            (K::Tab, KeyCode::Tab) => true,
            (K::BackTab, KeyCode::BackTab) => true,
            (K::Home, KeyCode::Home) => true,
            (K::End, KeyCode::End) => true,
            (K::F(n), KeyCode::F(x)) => n == x,
            _ => false,
        }
    }
}

pub struct Binding {
    pub mode: Mode,
    pub keys: &'static [K],
    pub action: Action,
    pub help: &'static str,
    /// Short label for the status bar; bindings without one stay in `?` only.
    pub hint: Option<&'static str>,
}

pub const KEYS: &[Binding] = &[
    b(
        Mode::Main,
        // F1 and F10 as in htop and nvtop.
        &[K::Char('?'), K::F(1)],
        Action::Help,
        "show / hide this help",
        Some("help"),
    ),
    b(
        Mode::Main,
        &[K::Char('q'), K::Ctrl('c'), K::F(10)],
        Action::Quit,
        "quit (a running worker is killed first)",
        Some("quit"),
    ),
    b(
        Mode::Main,
        &[K::Char('z')],
        Action::Zoom,
        "zoom: the focused panel fills the screen (Tab: the next one; z/Esc: back)",
        Some("zoom"),
    ),
    b(
        Mode::Main,
        &[K::Char('m')],
        Action::Mouse,
        "mouse off: the terminal selects text (m again: the wheel scrolls panels)",
        None,
    ),
    b(
        Mode::Main,
        &[K::Char('n')],
        Action::NextRank,
        "a watched job: objects and findings of the next rank alone (then all)",
        None,
    ),
    b(
        Mode::Main,
        &[K::Char('C')],
        Action::ClassMode,
        "class mode: the answer hidden till the verdicts; 1-9 predicts claim N",
        None,
    ),
    b(
        Mode::Main,
        &[K::Char('>')],
        Action::NextStep,
        "a lesson (--lesson): its next step and its question (< the previous)",
        None,
    ),
    b(
        Mode::Main,
        &[K::Up, K::Char('k')],
        Action::Up,
        "previous lab or recording",
        None,
    ),
    b(
        Mode::Main,
        &[K::Down, K::Char('j')],
        Action::Down,
        "next lab or recording",
        None,
    ),
    b(
        Mode::Main,
        &[K::Home, K::Char('g')],
        Action::First,
        "first lab or recording (as less and htop)",
        None,
    ),
    b(
        Mode::Main,
        &[K::End, K::Char('G')],
        Action::Last,
        "last lab or recording",
        None,
    ),
    b(
        Mode::Main,
        &[K::Char('/')],
        Action::Filter,
        "filter the labs list by typing",
        Some("filter"),
    ),
    b(
        Mode::Main,
        &[K::Enter, K::Char('r')],
        Action::Run,
        "run the lab (in step mode: run to the end); open a recording",
        Some("run"),
    ),
    b(
        Mode::Main,
        &[K::Char('s'), K::Char(' ')],
        Action::Step,
        "step: start paused, then one script line per press",
        Some("step"),
    ),
    b(
        Mode::Main,
        &[K::Esc],
        Action::Cancel,
        "cancel the running lab; else leave compare mode or zoom",
        Some("cancel"),
    ),
    b(
        Mode::Main,
        &[K::Char('v')],
        Action::NextVariant,
        "next variant of the lab",
        Some("variant"),
    ),
    b(
        Mode::Main,
        &[K::Char('V')],
        Action::PrevVariant,
        "previous variant",
        None,
    ),
    b(
        Mode::Main,
        &[K::Char('p')],
        Action::Params,
        "edit the lab's parameters",
        Some("params"),
    ),
    b(
        Mode::Main,
        &[K::Char('c')],
        Action::Compare,
        "compare this variant with the next, side by side (a recording too)",
        Some("compare"),
    ),
    b(
        Mode::Main,
        &[K::Char('R')],
        Action::Record,
        "record the lab's next run to a file (the status bar says where)",
        Some("record"),
    ),
    b(
        Mode::Main,
        &[K::Char('o')],
        Action::OpenRecording,
        "open the lab's recording in replay (no CUDA here: the shipped H100 one)",
        Some("recording"),
    ),
    b(
        Mode::Main,
        &[K::Tab],
        Action::FocusNext,
        "focus the next panel (for scrolling)",
        Some("panel"),
    ),
    b(
        Mode::Main,
        &[K::BackTab],
        Action::FocusPrev,
        "focus the previous panel",
        None,
    ),
    b(
        Mode::Main,
        &[K::PageUp],
        Action::PageUp,
        "scroll Verdicts up (Script when focused)",
        None,
    ),
    b(
        Mode::Main,
        &[K::PageDown],
        Action::PageDown,
        "scroll Verdicts down (Script when focused)",
        None,
    ),
    b(
        Mode::Filter,
        &[K::Enter],
        Action::Run,
        "keep the filter and go back to the list",
        None,
    ),
    b(
        Mode::Filter,
        &[K::Esc],
        Action::Cancel,
        "clear the filter",
        None,
    ),
    b(Mode::Filter, &[K::Up], Action::Up, "previous match", None),
    b(Mode::Filter, &[K::Down], Action::Down, "next match", None),
    b(
        Mode::Params,
        &[K::Up, K::Char('k')],
        Action::Up,
        "previous parameter",
        None,
    ),
    b(
        Mode::Params,
        &[K::Down, K::Char('j')],
        Action::Down,
        "next parameter",
        None,
    ),
    b(
        Mode::Params,
        &[K::Left, K::Char('-')],
        Action::Less,
        "smaller (stays within the range)",
        None,
    ),
    b(
        Mode::Params,
        &[K::Right, K::Char('+')],
        Action::More,
        "larger (stays within the range)",
        None,
    ),
    b(
        Mode::Params,
        &[K::Char('d')],
        Action::Reset,
        "back to the lab's default",
        None,
    ),
    b(
        Mode::Params,
        &[K::Enter],
        Action::Run,
        "set the typed number (digits and . type a value)",
        None,
    ),
    b(
        Mode::Params,
        &[K::Esc, K::Char('p')],
        Action::Cancel,
        "close the editor",
        None,
    ),
    b(
        Mode::Replay,
        &[K::Char(' ')],
        Action::PlayPause,
        "play / pause (at the end: play from the start)",
        Some("play"),
    ),
    b(
        Mode::Replay,
        &[K::Left],
        Action::ScrubBack,
        "a second back",
        None,
    ),
    b(
        Mode::Replay,
        &[K::Right],
        Action::ScrubForward,
        "a second forward",
        None,
    ),
    b(
        Mode::Replay,
        &[K::Char(',')],
        Action::CallBack,
        "one call back",
        None,
    ),
    b(
        Mode::Replay,
        &[K::Char('.'), K::Char('s')],
        Action::CallForward,
        "one call forward: step line by line",
        Some("step"),
    ),
    b(
        Mode::Replay,
        &[K::Home],
        Action::First,
        "the start of the run",
        None,
    ),
    b(
        Mode::Replay,
        &[K::End],
        Action::Last,
        "the end: the whole run",
        None,
    ),
    b(
        Mode::Replay,
        &[K::Char('-'), K::Char('[')],
        Action::Slower,
        "slower (down to 0.1×)",
        None,
    ),
    b(
        Mode::Replay,
        &[K::Char('+'), K::Char('='), K::Char(']')],
        Action::Faster,
        "faster (up to 10×)",
        None,
    ),
];

const fn b(
    mode: Mode,
    keys: &'static [K],
    action: Action,
    help: &'static str,
    hint: Option<&'static str>,
) -> Binding {
    Binding {
        mode,
        keys,
        action,
        help,
        hint,
    }
}

/// The action a key press has in `mode`, if any. Releases and repeats of
/// non-navigation keys are ignored (Windows-style terminals report both).
pub fn action(ev: &KeyEvent, mode: Mode) -> Option<Action> {
    if ev.kind == KeyEventKind::Release {
        return None;
    }
    let find = |mode: Mode| {
        KEYS.iter()
            .filter(|b| b.mode == mode)
            .find(|b| b.keys.iter().any(|k| k.matches(ev)))
            .map(|b| b.action)
    };
    match mode {
        // A replay's own keys win; the rest are the dashboard's.
        Mode::Replay => find(Mode::Replay).or_else(|| find(Mode::Main)),
        _ => find(mode),
    }
}

/// `Enter/r`: the labels of a binding's keys.
pub fn label(b: &Binding) -> String {
    b.keys
        .iter()
        .map(|k| k.label())
        .collect::<Vec<_>>()
        .join("/")
}

/// Status bar hints in `mode`, in table order: (first key, hint). A replay shows
/// its own hints, then the dashboard's that it does not shadow.
pub fn hints(mode: Mode) -> impl Iterator<Item = (String, &'static str)> {
    let replay = mode == Mode::Replay;
    let shadowed = move |b: &Binding| {
        replay
            && KEYS
                .iter()
                .filter(|r| r.mode == Mode::Replay)
                .any(|r| r.keys.iter().any(|k| b.keys.first() == Some(k)) || r.hint == b.hint)
    };
    KEYS.iter()
        .filter(move |b| (replay && b.mode == Mode::Replay) || b.mode == Mode::Main)
        .filter(move |b| b.mode == Mode::Replay || !shadowed(b))
        .filter_map(|b| Some((b.keys.first()?.label(), b.hint?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn no_key_is_bound_twice_in_one_mode() {
        for (i, a) in KEYS.iter().enumerate() {
            for b in &KEYS[i + 1..] {
                if a.mode == b.mode {
                    for k in a.keys {
                        assert!(!b.keys.contains(k), "{k:?} bound twice in {:?}", a.mode);
                    }
                }
            }
        }
    }

    #[test]
    fn keys_map_to_their_actions() {
        assert_eq!(
            action(&key(KeyCode::Char('q')), Mode::Main),
            Some(Action::Quit)
        );
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action(&ctrl_c, Mode::Main), Some(Action::Quit));
        assert_eq!(
            action(&key(KeyCode::Char('c')), Mode::Main),
            Some(Action::Compare)
        );
        assert_eq!(action(&key(KeyCode::Char('x')), Mode::Main), None);
        assert_eq!(action(&key(KeyCode::F(2)), Mode::Main), None);
        assert_eq!(
            action(&key(KeyCode::Left), Mode::Params),
            Some(Action::Less)
        );
    }

    #[test]
    fn f1_opens_help_and_f10_quits_as_in_htop() {
        for mode in [Mode::Main, Mode::Replay] {
            assert_eq!(action(&key(KeyCode::F(1)), mode), Some(Action::Help));
            assert_eq!(action(&key(KeyCode::F(10)), mode), Some(Action::Quit));
        }
        let help = KEYS.iter().find(|b| b.action == Action::Help);
        assert_eq!(help.map(label).as_deref(), Some("?/F1"));
        // The status bar keeps the short first keys.
        assert!(hints(Mode::Main).any(|(k, h)| k == "?" && h == "help"));
        assert!(hints(Mode::Main).any(|(k, h)| k == "q" && h == "quit"));
    }
}
