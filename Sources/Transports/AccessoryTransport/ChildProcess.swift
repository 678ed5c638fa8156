import Glibc
import NIOCore
import Synchronization

/// A child process started with `posix_spawn` in a process group of its own, reaped by a
/// dedicated thread the moment it exits, so it never lingers as a zombie whatever its user does.
///
/// Ending it ends the whole group: a wrapper script (pyenv's `python3`, a virtualenv, any
/// shell) and everything it started go together, instead of the wrapper dying and its children
/// living on, adopted by init. Signals go to the group while it is known to exist: while the
/// child is not reaped (it is a member), or while a member was seen after that (the kernel does
/// not hand out a group's id while the group has members).
final class ChildProcess: Sendable {
    let pid: pid_t
    private let exitPromise: EventLoopPromise<ExitStatus>
    /// `nil` while running. Guarded so that "not reaped yet" and "send a signal" are atomic.
    private let status = TrackedMutex<ExitStatus?>(nil)
    /// Whether the process group may still have members (cleared once `kill` finds none).
    private let groupMayExist = Atomic<Bool>(true)

    private init(pid: pid_t, exitPromise: EventLoopPromise<ExitStatus>) {
        self.pid = pid
        self.exitPromise = exitPromise
    }

    /// Completes when the child has exited and been reaped.
    var exitFuture: EventLoopFuture<ExitStatus> { self.exitPromise.futureResult }

    /// How the child ended, or `nil` while it runs.
    var exitStatus: ExitStatus? { self.status.withLock { $0 } }

    /// Starts `arguments[0]` (an absolute path) with `arguments` as its argv, this process's
    /// environment, and the given descriptors as its 0, 1 and 2. Every other descriptor is
    /// closed in the child.
    static func spawn(
        _ arguments: [String],
        standardInput: FileDescriptor,
        standardOutput: FileDescriptor,
        standardError: FileDescriptor,
        exitReportedOn eventLoop: any EventLoop
    ) throws(Errno) -> ChildProcess {
        let pid = try Self.posixSpawn(arguments, stdio: [standardInput, standardOutput, standardError])
        let process = ChildProcess(pid: pid, exitPromise: eventLoop.makePromise())
        do {
            try DetachedThread.start { process.reapWhenExited() }
        } catch {
            // Without a reaper the child would become a zombie: end it now, synchronously.
            _ = kill(pid, SIGKILL)
            process.reapWhenExited()
            throw error
        }
        return process
    }

    /// Sends `signal` to the child's process group while it may have members.
    func send(_ signal: CInt) {
        self.status.withLock { status in
            guard status == nil || self.groupMayExist.load(ordering: .relaxed) else { return }
            // The group's id is the child's pid (POSIX_SPAWN_SETPGROUP with 0).
            if kill(-self.pid, signal) != 0 && errno == ESRCH { self.groupMayExist.store(false, ordering: .relaxed) }
        }
    }

    /// Whether any process of the child's group is still running. Zombies do not count: one
    /// whose adopter does not reap it never goes away (ProcessGroupScan).
    var groupIsAlive: Bool {
        let exists = self.status.withLock { status in
            guard status == nil || self.groupMayExist.load(ordering: .relaxed) else { return false }
            if kill(-self.pid, 0) != 0 && errno == ESRCH {
                self.groupMayExist.store(false, ordering: .relaxed)
                return false
            }
            return true
        }
        // While the child is not reaped it is a member, alive or about to be reaped.
        guard exists, self.exitStatus != nil else { return exists }
        return ProcessGroupScan.hasLiveMember(self.pid) ?? true
    }

    /// Ends the child and its group politely: after `grace` (time to exit on its own once its
    /// stdin closed) `SIGTERM`, and `SIGKILL` to whatever is still there `killAfter` later.
    func terminate(grace: TimeAmount, killAfter: TimeAmount, on eventLoop: any EventLoop) {
        eventLoop.scheduleTask(in: grace) { self.send(SIGTERM) }
        eventLoop.scheduleTask(in: grace + killAfter) { self.send(SIGKILL) }
    }

    /// Waits until the child is reaped and no process of its group is left, at most `limit`
    /// after the child's exit (then the group gets `SIGKILL`).
    func waitUntilGroupEnded(limit: Duration) async {
        _ = try? await self.exitFuture.get()
        // The caller may be cancelled (a CLI after SIGINT): the poll must still wait, not spin.
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while self.groupIsAlive {
            if clock.now >= deadline {
                self.send(SIGKILL)
                return
            }
            await sleepUncancelled(for: .milliseconds(20))
        }
    }

    /// Blocks until the child exits, reaps it and completes ``exitFuture``.
    private func reapWhenExited() {
        // WNOWAIT: learn that it exited but leave it unreaped, so its pid stays reserved
        // until the reap below, made under the same lock as `send`.
        var info = siginfo_t()
        let waited: Bool
        do {
            _ = try retryingOnInterrupt { waitid(P_PID, id_t(self.pid), &info, WEXITED | WNOWAIT) }
            waited = true
        } catch {
            waited = false  // ECHILD: reaped elsewhere (SIGCHLD ignored); the status is lost
        }
        let result: ExitStatus = self.status.withLock { status in
            var raw: CInt = 0
            let reaped = waited ? (try? retryingOnInterrupt { waitpid(self.pid, &raw, 0) }) : nil
            let result = reaped == self.pid ? ExitStatus(waitStatus: raw) : .unknown
            status = result
            return result
        }
        self.exitPromise.succeed(result)
    }

    /// `posix_spawn(3)` with file actions that put `stdio` on 0, 1, 2 and close everything
    /// else, and with signals reset: NIO ignores `SIGPIPE` in this process, and an ignored
    /// signal stays ignored across exec, which would stop a child like `cat` from dying on a
    /// closed pipe.
    private static func posixSpawn(_ arguments: [String], stdio: [FileDescriptor]) throws(Errno) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, source) in stdio.enumerated() {
            // dup2 clears close-on-exec on the copy, so exactly these survive exec.
            let result = posix_spawn_file_actions_adddup2(&actions, source.rawValue, CInt(target))
            guard result == 0 else { throw Errno(rawValue: result) }
        }
        // NIO's pipe channels dup descriptors without O_CLOEXEC (e.g. the write side of a
        // serial line), so close-on-exec alone would leak them into the child.
        if let closeFrom = GlibcExtensions.addCloseFrom {
            let result = closeFrom(&actions, 3)
            guard result == 0 else { throw Errno(rawValue: result) }
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        for signal in [SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2] {
            sigaddset(&defaultSignals, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
        // A process group of its own (its id is the child's pid), so that ending the device
        // ends everything the command started. The price: the group is not the terminal's
        // foreground group, so Ctrl-C reaches it through us (the link closes, the group is
        // ended), and a command that prompts on the terminal (an ssh password) is stopped
        // instead: use keys or SSH_ASKPASS.
        posix_spawnattr_setpgroup(&attributes, 0)
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var argv: [UnsafeMutablePointer<CChar>?] = []
        defer { argv.forEach { free($0) } }
        for argument in arguments {
            guard let copy = strdup(argument) else { throw Errno(rawValue: ENOMEM) }
            argv.append(copy)
        }
        argv.append(nil)

        var pid: pid_t = 0
        guard let program = argv.first ?? nil else { throw Errno(rawValue: EINVAL) }
        let result = posix_spawn(&pid, program, &actions, &attributes, argv, environ)
        guard result == 0 else { throw Errno(rawValue: result) }
        return pid
    }
}
