/// Sleeps for `duration` even when the calling task is cancelled.
///
/// For the polls of a cleanup that must run its course (a child's exit waited for, a shutdown's
/// grace period): in a cancelled task `Task.sleep` returns at once, and such a poll turns into
/// a busy loop that takes the cores from the very thing it waits for.
package func sleepUncancelled(for duration: Duration) async {
    // An unstructured task does not inherit the caller's cancellation.
    await Task { try? await Task.sleep(for: duration) }.value
}
