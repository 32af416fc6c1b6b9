//! Spin waits: code that waits for another thread to change memory by
//! reading it in a loop (`while (!flag) ;`, OpenBLAS's `dgetrf_parallel`,
//! a test-and-test-and-set lock's inner loop, `pause` loops).
//!
//! Natively the other thread runs on another CPU, or the kernel preempts
//! the spinner; under N:1 the other thread is a fiber of the same OS thread
//! and runs only once the spinner is preempted ([`tick`](super::tick)).
//! A context is preempted when it has run a whole slice without a switch,
//! which a spinner that began just after a switch reaches only a whole
//! slice later: each wait cost 10–20 ms of CPU. So a tick also looks at the
//! interrupted instruction: when it lies in a short loop that reads memory
//! at addresses the loop never changes (or executes `pause`: a spinlock's
//! backoff between two reads), writes no memory and calls nothing, the
//! context is waiting for someone else, and it is preempted at once (the
//! same safety checks and the same yield as a slice's end).
//!
//! The test is a heuristic with a one-sided cost: a loop taken for a spin
//! wait that is not one (a search that reads one address over and over)
//! is only switched away from sooner, where switching was already allowed;
//! a spin wait not recognised (a loop longer than [`MOST`] instructions, or
//! one that calls a function) ends at the slice's end as before.

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};

/// How far before the interrupted instruction a loop may begin.
const BEFORE: usize = 64;
/// How far after it the loop's closing jump may end.
const AFTER: usize = 64;
/// Instructions a spin loop may have at most.
const MOST: usize = 16;

/// Builds the decoder's tables (made on first use, which allocates) while
/// nothing is held: the decoding that counts runs in a signal handler.
pub(super) fn warm() {
    let _ = classify(&[0x48, 0x8b, 0x02, 0x48, 0x85, 0xc0, 0x75, 0xf8], 0x1000, 0x1006);
}

/// Whether the instruction at `rip`, interrupted by a tick, is in a spin
/// wait (see the module docs). Reads the code around it within its page
/// (the page `rip` is on is mapped; its neighbours may not be), through a
/// checked copy: a page that can be executed but not read (an
/// execute-only mapping) is then no spin wait rather than a fault.
pub(super) fn waits(rip: usize) -> bool {
    const PAGE: usize = 4096;
    let page = rip & !(PAGE - 1);
    let lo = rip.saturating_sub(BEFORE).max(page);
    let hi = rip.saturating_add(AFTER).min(page + PAGE);
    let mut code = [0u8; BEFORE + AFTER];
    let code = &mut code[..hi - lo];
    if crate::user::read_bytes(lo as *const u8, code).is_err() {
        return false;
    }
    classify(code, lo, rip)
}

/// [`waits`] for the bytes `code`, which are at `at` in memory, around the
/// instruction at `rip`.
fn classify(code: &[u8], at: usize, rip: usize) -> bool {
    let mut body = [Instruction::default(); MOST];
    let Some(n) = find_loop(code, at, rip, &mut body) else {
        return false;
    };
    is_spin(&body[..n])
}

/// The loop around `rip`: from the target of the first backward jump
/// after `rip` (to `rip` or before it) up to that jump, decoded into
/// `body`; its length, or None where there is no such loop of at most
/// [`MOST`] straight-line instructions.
fn find_loop(code: &[u8], at: usize, rip: usize, body: &mut [Instruction; MOST]) -> Option<usize> {
    let decoder = |from: usize| {
        let off = from.checked_sub(at)?;
        let mut d = Decoder::with_ip(64, code, at as u64, DecoderOptions::NONE);
        d.set_position(off).ok()?;
        d.set_ip(from as u64);
        Some(d)
    };
    // Forward from `rip` to the closing jump.
    let mut d = decoder(rip)?;
    let mut after = 0;
    let (start, close) = loop {
        if after == MOST || !d.can_decode() {
            return None;
        }
        let i = d.decode();
        if i.is_invalid() {
            return None;
        }
        after += 1;
        if i.is_jcc_short_or_near() || i.is_jmp_short_or_near() {
            let t = i.near_branch_target() as usize;
            if t <= rip {
                break (t, i.ip() as usize);
            }
            if i.is_jmp_short_or_near() {
                // Straight on elsewhere: not a short loop.
                return None;
            }
        }
    };
    // From the loop's start to that jump, through `rip` on an instruction
    // boundary (else the bytes before `rip` were decoded out of step).
    let mut d = decoder(start)?;
    let (mut n, mut through) = (0, false);
    loop {
        if n == MOST || !d.can_decode() {
            return None;
        }
        let i = d.decode();
        let ip = i.ip() as usize;
        if i.is_invalid() || ip > close {
            return None;
        }
        through |= ip == rip;
        body[n] = i;
        n += 1;
        if ip == close {
            return through.then_some(n);
        }
    }
}

/// Whether the loop `body` only reads memory, at addresses it does not
/// change, and reads some or pauses.
fn is_spin(body: &[Instruction]) -> bool {
    let (start, end) = (body[0].ip(), body[body.len() - 1].next_ip());
    // Registers the loop changes, from instruction to instruction: a load
    // from an unchanging address, or a copy of an unchanged register, does
    // not count (`mov -8(%rbp),%rax; mov (%rax),%eax` reads one address).
    let mut changed: u64 = 0;
    loop {
        let before = changed;
        for i in body {
            if let Some((dst, from_changed)) = written(i, changed) {
                if from_changed {
                    changed |= bit(dst);
                }
            }
        }
        if changed == before {
            break;
        }
    }
    // Memory read, or a `pause`: a delay loop between two reads (a
    // spinlock's backoff) reads nothing, but no computation pauses.
    let mut waits = false;
    for (k, i) in body.iter().enumerate() {
        if i.has_lock_prefix() || i.has_rep_prefix() || i.has_repne_prefix() {
            return false;
        }
        let closing = k == body.len() - 1;
        match i.mnemonic() {
            Mnemonic::Pause => waits = true,
            Mnemonic::Nop | Mnemonic::Lfence => {}
            _ if i.is_jcc_short_or_near() || (closing && i.is_jmp_short_or_near()) => {
                // Only the closing jump goes back; the others leave.
                let t = i.near_branch_target();
                if !closing && (start..end).contains(&t) {
                    return false;
                }
            }
            // Read-only: compares and tests (flags only).
            Mnemonic::Cmp | Mnemonic::Test | Mnemonic::Bt => {}
            m if writes_first(m) => {
                if i.op_count() == 0 || i.op_kind(0) != OpKind::Register {
                    return false; // a store
                }
            }
            _ => return false,
        }
        for op in 0..i.op_count() {
            if i.op_kind(op) == OpKind::Memory {
                if i.mnemonic() == Mnemonic::Lea {
                    continue;
                }
                waits = true;
                if changed & (bit(i.memory_base()) | bit(i.memory_index())) != 0 {
                    return false;
                }
            }
        }
    }
    waits
}

/// Instructions that write their first operand (a register, for a loop to
/// be a spin wait) and read the rest.
fn writes_first(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Mov | Movzx
            | Movsx
            | Movsxd
            | Movd
            | Movq
            | Add
            | Sub
            | And
            | Or
            | Xor
            | Inc
            | Dec
            | Neg
            | Not
            | Shl
            | Shr
            | Sar
            | Lea
            | Cmove
            | Cmovne
            | Sete
            | Setne
    )
}

/// The general register `i` writes, and whether the value it writes
/// changes from one pass of the loop to the next, given the registers
/// `changed` so far: a load from an address made of unchanged registers,
/// a copy of an unchanged register or a constant does not; arithmetic does.
fn written(i: &Instruction, changed: u64) -> Option<(Register, bool)> {
    if !writes_first(i.mnemonic()) || i.op_count() == 0 || i.op_kind(0) != OpKind::Register {
        return None;
    }
    let dst = i.op_register(0);
    let copies = matches!(
        i.mnemonic(),
        Mnemonic::Mov | Mnemonic::Movzx | Mnemonic::Movsx | Mnemonic::Movsxd | Mnemonic::Movd | Mnemonic::Movq
    );
    let from_changed = if !copies || i.op_count() != 2 {
        true
    } else {
        match i.op_kind(1) {
            OpKind::Register => changed & bit(i.op_register(1)) != 0,
            OpKind::Memory => changed & (bit(i.memory_base()) | bit(i.memory_index())) != 0,
            _ => false, // an immediate
        }
    };
    Some((dst, from_changed))
}

/// A bit per general register (`rax`…`r15`, whatever part of it is
/// named); 0 for any other register (`rip`, none, a vector register,
/// which addresses no memory here).
fn bit(r: Register) -> u64 {
    let full = r.full_register();
    if full.is_gpr64() {
        1 << (full as u32 - Register::RAX as u32)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::classify;

    /// Whether `code`, placed at 0x1000, spins at the instruction at byte
    /// `rip` of it.
    fn spins(code: &[u8], rip: usize) -> bool {
        classify(code, 0x1000, 0x1000 + rip)
    }

    #[test]
    fn a_load_test_and_jump_back_is_a_spin_wait() {
        // 0: mov (%rdx),%rax; 3: test %rax,%rax; 6: jne 0 (OpenBLAS's dgetrf)
        let code = [0x48, 0x8b, 0x02, 0x48, 0x85, 0xc0, 0x75, 0xf8];
        for rip in [0, 3, 6] {
            assert!(spins(&code, rip), "at {rip}");
        }
    }

    #[test]
    fn a_pause_loop_on_a_global_is_a_spin_wait() {
        // 0: pause; 2: mov 0x100(%rip),%eax; 8: test %eax,%eax; a: je 0
        let code = [0xf3, 0x90, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0x85, 0xc0, 0x74, 0xf4];
        assert!(spins(&code, 2));
        assert!(spins(&code, 0));
    }

    #[test]
    fn a_pointer_loaded_from_the_frame_is_an_unchanging_address() {
        // -O0's `while (!*p)`: 0: mov -8(%rbp),%rax; 4: mov (%rax),%eax;
        // 6: test %eax,%eax; 8: je 0
        let code = [0x48, 0x8b, 0x45, 0xf8, 0x8b, 0x00, 0x85, 0xc0, 0x74, 0xf6];
        assert!(spins(&code, 4));
    }

    #[test]
    fn a_counter_in_a_register_is_still_a_spin_wait() {
        // 0: add $1,%rcx; 4: mov (%rdx),%eax; 6: test %eax,%eax; 8: je 0
        let code = [0x48, 0x83, 0xc1, 0x01, 0x8b, 0x02, 0x85, 0xc0, 0x74, 0xf6];
        assert!(spins(&code, 4));
    }

    #[test]
    fn a_walk_over_memory_is_not() {
        // 0: add (%rdi,%rcx,8),%rax; 4: add $1,%rcx; 8: cmp %rcx,%rsi; b: jne 0
        let code = [
            0x48, 0x03, 0x04, 0xcf, 0x48, 0x83, 0xc1, 0x01, 0x48, 0x39, 0xce, 0x75, 0xf3,
        ];
        assert!(!spins(&code, 0));
        assert!(!spins(&code, 8));
    }

    #[test]
    fn a_loop_that_stores_is_not() {
        // 0: mov (%rdx),%eax; 2: mov %eax,(%rsi); 4: test %eax,%eax; 6: je 0
        let code = [0x8b, 0x02, 0x89, 0x06, 0x85, 0xc0, 0x74, 0xf8];
        assert!(!spins(&code, 0));
    }

    #[test]
    fn a_locked_retry_is_not() {
        // 0: mov %ecx,%eax; 2: lock cmpxchg %edx,(%rdi); 6: jne 0
        let code = [0x89, 0xc8, 0xf0, 0x0f, 0xb1, 0x17, 0x75, 0xf8];
        assert!(!spins(&code, 2));
    }

    #[test]
    fn a_loop_that_calls_is_not() {
        // 0: call +0 (to 5); 5: test %eax,%eax; 7: je 0
        let code = [0xe8, 0x00, 0x00, 0x00, 0x00, 0x85, 0xc0, 0x74, 0xf7];
        assert!(!spins(&code, 5));
    }

    #[test]
    fn a_loop_that_reads_nothing_is_not() {
        // 0: add $1,%rax; 4: cmp %rbx,%rax; 7: jne 0
        let code = [0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xd8, 0x75, 0xf7];
        assert!(!spins(&code, 0));
    }

    #[test]
    fn a_pause_delay_is_a_spin_wait() {
        // A spinlock's backoff between two reads of the lock:
        // 0: pause; 2: sub $1,%eax; 5: jne 0
        let code = [0xf3, 0x90, 0x83, 0xe8, 0x01, 0x75, 0xf9];
        assert!(spins(&code, 2));
    }

    #[test]
    fn straight_code_is_not() {
        // mov (%rdx),%rax; test %rax,%rax; ret
        let code = [0x48, 0x8b, 0x02, 0x48, 0x85, 0xc0, 0xc3];
        assert!(!spins(&code, 0));
    }

    #[test]
    fn an_inner_loop_is_found_from_inside_it() {
        // The dgetrf loop nest: 0: mov %rcx,%rdx; 3: shl $6,%rdx;
        // 7: add %rsi,%rdx; a: mov (%rdx),%rax; d: test %rax,%rax;
        // 10: jne a; 12: add $1,%rcx; 16: cmp %rbx,%rcx; 19: jne 0
        let code = [
            0x48, 0x89, 0xca, 0x48, 0xc1, 0xe2, 0x06, 0x48, 0x01, 0xf2, 0x48, 0x8b, 0x02, 0x48, 0x85, 0xc0, 0x75, 0xf8,
            0x48, 0x83, 0xc1, 0x01, 0x48, 0x39, 0xd9, 0x75, 0xe5,
        ];
        assert!(spins(&code, 0x0d));
        // The outer loop changes the address the inner one reads.
        assert!(!spins(&code, 0x12));
    }
}
