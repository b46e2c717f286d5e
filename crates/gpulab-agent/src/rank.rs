//! A process's rank in a distributed job, from the variables its launcher set:
//! the parent groups what each rank holds by it (`gpulab watch -- torchrun …`).
//!
//! Read once, when the agent attaches: launchers set them before the process
//! starts, and a program that changes its own environment later does not
//! change the job it is in.

use gpulab_events::Rank;

/// The launchers' variables, most specific first: torchrun's `RANK` (also
/// what `torch.distributed` reads, so a program launched by hand sets it
/// too), Open MPI's, MPICH's and Intel MPI's PMI, then Slurm's task id (srun
/// sets it for every task; a batch script's own step has 0).
const SOURCES: [Source; 4] = [
    Source {
        rank: "RANK",
        local: "LOCAL_RANK",
        size: "WORLD_SIZE",
    },
    Source {
        rank: "OMPI_COMM_WORLD_RANK",
        local: "OMPI_COMM_WORLD_LOCAL_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
    },
    Source {
        rank: "PMI_RANK",
        local: "MPI_LOCALRANKID",
        size: "PMI_SIZE",
    },
    Source {
        rank: "SLURM_PROCID",
        local: "SLURM_LOCALID",
        size: "SLURM_NTASKS",
    },
];

struct Source {
    rank: &'static str,
    local: &'static str,
    size: &'static str,
}

/// The rank `get` (a variable's value) says, from the first launcher whose
/// rank variable holds a number; None outside a job.
pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Option<Rank> {
    let number = |name: &str| get(name).and_then(|v| v.trim().parse::<u32>().ok());
    SOURCES.iter().find_map(|s| {
        Some(Rank {
            rank: number(s.rank)?,
            local_rank: number(s.local),
            world_size: number(s.size),
            from: s.rank.to_string(),
        })
    })
}

/// This process's rank, read at the first attach and kept: a process forked
/// afterwards (whose agent attaches again) reads no variable between its fork
/// and its exec, where taking the environment's lock could wait forever on a
/// thread of the parent that no longer exists.
pub fn of_this_process() -> Option<Rank> {
    static RANK: std::sync::OnceLock<Option<Rank>> = std::sync::OnceLock::new();
    RANK.get_or_init(|| from_env(|name| std::env::var(name).ok()))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn torchrun_says_rank_local_rank_and_world_size() {
        let rank = from_env(env(&[
            ("RANK", "3"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("SLURM_PROCID", "0"),
        ]));
        assert_eq!(
            rank,
            Some(Rank {
                rank: 3,
                local_rank: Some(1),
                world_size: Some(4),
                from: "RANK".into()
            })
        );
    }

    #[test]
    fn each_launcher_is_read_by_its_own_names() {
        let ompi = from_env(env(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
        ]));
        assert_eq!(
            ompi.as_ref().map(|r| (r.rank, r.local_rank, r.world_size)),
            Some((5, Some(1), Some(8)))
        );
        let pmi = from_env(env(&[("PMI_RANK", "2"), ("PMI_SIZE", "4")]));
        assert_eq!(
            pmi.as_ref()
                .map(|r| (r.rank, r.local_rank, r.from.as_str())),
            Some((2, None, "PMI_RANK"))
        );
        let slurm = from_env(env(&[("SLURM_PROCID", "7"), ("SLURM_LOCALID", "3")]));
        assert_eq!(slurm.map(|r| (r.rank, r.local_rank)), Some((7, Some(3))));
    }

    #[test]
    fn no_launcher_or_no_number_is_no_rank() {
        assert_eq!(from_env(env(&[])), None);
        assert_eq!(from_env(env(&[("LOCAL_RANK", "0")])), None);
        // A rank that is not a number is skipped for the next launcher's.
        let rank = from_env(env(&[("RANK", "zero"), ("PMI_RANK", "1")]));
        assert_eq!(rank.map(|r| (r.rank, r.from)), Some((1, "PMI_RANK".into())));
        assert_eq!(from_env(env(&[("RANK", "-1")])), None);
    }
}
