//! The worker's command protocol: what a run source writes on a worker's stdin,
//! one word a line. The worker reads it; a UI never does (it steers a run through
//! its source, which speaks this).

/// Commands the parent sends on the worker's stdin, one word a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Run to the end without pausing.
    Run,
    /// Do one more line, then wait.
    Step,
    /// Stop now; the run ends as cancelled.
    Stop,
}

impl Command {
    pub fn parse(line: &str) -> Option<Command> {
        match line.trim() {
            "run" => Some(Command::Run),
            "step" => Some(Command::Step),
            "stop" => Some(Command::Stop),
            _ => None,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Command::Run => "run",
            Command::Step => "step",
            Command::Stop => "stop",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_reads_back_from_its_word() {
        for c in [Command::Run, Command::Step, Command::Stop] {
            assert_eq!(Command::parse(&format!("{}\n", c.word())), Some(c));
        }
        assert_eq!(Command::parse("jump"), None);
    }
}
