//! The `rpjrt` command-line tool.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    // `rpjrt info --json | head`: end quietly on a closed pipe instead of panicking.
    rpjrt::exit_quietly_on_broken_pipe();
    // `ulimit -f`: a write past the limit fails with "File too large", reported naming the
    // file with its temporary file removed, instead of SIGXFSZ ending rpjrt mid-write.
    rpjrt_raw::files::ignore_file_size_signal();
    // `args_os`: a file name that is not UTF-8 is a valid path, and any other such argument
    // is a usage error from the parser (`args()` would panic on it).
    let code = rpjrt_cli::run_from_args(std::env::args_os());
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
