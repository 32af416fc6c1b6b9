//! The curated list of libc (and liburing) functions that can block the
//! calling thread, by area. A program importing one that `libgreenhook.so`
//! does not export would block the whole hub (every fiber) while it waits.
//!
//! What *is* hooked is never listed here: it is read from the library's
//! dynamic symbol table.

/// Areas of blocking functions: (area, functions).
pub const BLOCKING: &[(&str, &[&str])] = &[
    (
        "fd I/O",
        &[
            "read",
            "readv",
            "pread",
            "pread64",
            "preadv",
            "preadv64",
            "preadv2",
            "preadv64v2",
            "write",
            "writev",
            "pwrite",
            "pwrite64",
            "pwritev",
            "pwritev64",
            "pwritev2",
            "pwritev64v2",
            "sendfile",
            "sendfile64",
            "splice",
            "tee",
            "vmsplice",
            "copy_file_range",
            "__read_chk",
            "__pread_chk",
            "__pread64_chk",
        ],
    ),
    (
        "sockets",
        &[
            "accept",
            "accept4",
            "connect",
            "recv",
            "recvfrom",
            "recvmsg",
            "recvmmsg",
            "send",
            "sendto",
            "sendmsg",
            "sendmmsg",
            "__recv_chk",
            "__recvfrom_chk",
        ],
    ),
    (
        "multiplexing",
        &[
            "poll",
            "ppoll",
            "select",
            "pselect",
            "epoll_wait",
            "epoll_pwait",
            "epoll_pwait2",
            "__poll_chk",
            "__ppoll_chk",
        ],
    ),
    ("sleeps", &["sleep", "usleep", "nanosleep", "clock_nanosleep"]),
    (
        "pthreads",
        &[
            "pthread_join",
            "pthread_timedjoin_np",
            "pthread_clockjoin_np",
            "pthread_mutex_lock",
            "pthread_mutex_timedlock",
            "pthread_mutex_clocklock",
            "pthread_cond_wait",
            "pthread_cond_timedwait",
            "pthread_cond_clockwait",
            "pthread_rwlock_rdlock",
            "pthread_rwlock_wrlock",
            "pthread_rwlock_timedrdlock",
            "pthread_rwlock_timedwrlock",
            "pthread_rwlock_clockrdlock",
            "pthread_rwlock_clockwrlock",
            "pthread_barrier_wait",
            "pthread_spin_lock",
        ],
    ),
    ("semaphores", &["sem_wait", "sem_timedwait", "sem_clockwait"]),
    (
        "DNS",
        &[
            "getaddrinfo",
            "getnameinfo",
            "gethostbyname",
            "gethostbyname2",
            "gethostbyname_r",
            "gethostbyname2_r",
            "gethostbyaddr",
            "gethostbyaddr_r",
            "res_query",
            "res_search",
            "res_nquery",
            "res_nsearch",
            "__res_query",
            "__res_search",
        ],
    ),
    (
        "stdio input",
        &[
            "fgets",
            "fgets_unlocked",
            "gets",
            "fread",
            "fread_unlocked",
            "getline",
            "getdelim",
            "__getdelim",
            "fgetc",
            "fgetc_unlocked",
            "getc",
            "getc_unlocked",
            "_IO_getc",
            "getchar",
            "getchar_unlocked",
            "fgetwc",
            "getwc",
            "getwchar",
            "fgetws",
            "scanf",
            "fscanf",
            "vscanf",
            "vfscanf",
            "__isoc99_scanf",
            "__isoc99_fscanf",
            "__isoc99_vscanf",
            "__isoc99_vfscanf",
            "__isoc23_scanf",
            "__isoc23_fscanf",
            "__isoc23_vscanf",
            "__isoc23_vfscanf",
            "__fgets_chk",
            "__fgets_unlocked_chk",
            "__fread_chk",
            "__fread_unlocked_chk",
            "__gets_chk",
        ],
    ),
    (
        "processes",
        &[
            "system", "popen", "pclose", "wait", "waitpid", "wait3", "wait4", "waitid",
        ],
    ),
    (
        "disk sync",
        &["fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "msync"],
    ),
    (
        "signals",
        &["sigwait", "sigwaitinfo", "sigtimedwait", "pause", "sigsuspend"],
    ),
    ("file locks", &["flock", "lockf", "lockf64"]),
    (
        "SysV/POSIX IPC",
        &[
            "msgrcv",
            "msgsnd",
            "semop",
            "semtimedop",
            "mq_receive",
            "mq_timedreceive",
            "mq_send",
            "mq_timedsend",
        ],
    ),
    ("terminals", &["tcdrain"]),
];

/// Prefixes of blocking function families (liburing's submission/wait calls
/// enter the kernel with their own system calls).
pub const BLOCKING_PREFIXES: &[(&str, &str)] = &[("io_uring", "io_uring_"), ("io_uring", "__io_uring_")];

/// Functions that may be hooked and still block for some of their uses:
/// (function, which uses still block the hub). Reported, but they do not
/// fail `doctor` on their own: most programs never make those uses.
pub const PARTLY_COVERED: &[(&str, &str)] = &[
    (
        "syscall",
        "only SYS_futex is cooperative; other system call numbers (read, ppoll, wait4, io_uring_enter...) pass through and block",
    ),
];

/// The area of `name` if it is a known blocking function.
pub fn area(name: &str) -> Option<&'static str> {
    BLOCKING
        .iter()
        .find(|(_, names)| names.contains(&name))
        .map(|(area, _)| *area)
        .or_else(|| {
            BLOCKING_PREFIXES
                .iter()
                .find(|(_, prefix)| name.starts_with(prefix))
                .map(|(area, _)| *area)
        })
}

/// What still blocks if `name` is hooked, for the partly covered functions.
pub fn partial_note(name: &str) -> Option<&'static str> {
    PARTLY_COVERED.iter().find(|(n, _)| *n == name).map(|(_, note)| *note)
}
