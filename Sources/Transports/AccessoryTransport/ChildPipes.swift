/// The three pipes between this process and a child: the child's stdin, stdout and stderr.
/// All ends are close-on-exec; the spawn `dup2`s the child's ends onto 0, 1 and 2.
struct ChildPipes {
    let stdin: (read: FileDescriptor, write: FileDescriptor)
    let stdout: (read: FileDescriptor, write: FileDescriptor)
    let stderr: (read: FileDescriptor, write: FileDescriptor)

    init() throws(Errno) {
        let stdin = try FileDescriptor.pipe()
        let stdout: (read: FileDescriptor, write: FileDescriptor)
        let stderr: (read: FileDescriptor, write: FileDescriptor)
        do throws(Errno) {
            stdout = try FileDescriptor.pipe()
            do throws(Errno) {
                stderr = try FileDescriptor.pipe()
            } catch {
                Self.close(stdout)
                throw error
            }
        } catch {
            Self.close(stdin)
            throw error
        }
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
    }

    /// Closes the ends the child uses, once it has its own copies.
    func closeChildEnds() {
        try? self.stdin.read.close()
        try? self.stdout.write.close()
        try? self.stderr.write.close()
    }

    func closeAll() {
        Self.close(self.stdin)
        Self.close(self.stdout)
        Self.close(self.stderr)
    }

    private static func close(_ pipe: (read: FileDescriptor, write: FileDescriptor)) {
        try? pipe.read.close()
        try? pipe.write.close()
    }
}
