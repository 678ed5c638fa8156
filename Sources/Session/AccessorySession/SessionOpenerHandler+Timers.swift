import NIOCore

/// The opener's timers: HELLO resent until answered, and the liveness tick that sends PINGs and
/// tells a device reading a backlog slowly from a dead one (docs/framing.md §4).
extension SessionOpenerHandler {
    /// Resends HELLO (fresh nonce) after `delay`, then after twice that, until answered.
    func scheduleHelloResend(after delay: TimeAmount, context: ChannelHandlerContext) {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.helloResendTimer = context.eventLoop.scheduleTask(in: delay) {
            let handler = bound.value
            guard !handler.established, !handler.ended, let context = handler.context, var machine = handler.machine
            else { return }
            let actions = machine.resendHello(nonce: UInt64.random(in: 1...UInt64.max))
            handler.machine = machine
            handler.run(actions, context: context)
            context.flush()
            handler.scheduleHelloResend(after: delay * 2, context: context)
        }
    }

    /// Starts the liveness tick (every half ping interval) once the session is established.
    func startPinging(context: ChannelHandlerContext) {
        guard let interval = self.configuration.pingInterval else { return }
        let amount = TimeAmount(interval)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.lastPingTick = .now()
        if let waiting = self.waitingBytes(context: context) { self.outbound.look(waiting: waiting) }
        self.pingTimer = context.eventLoop.scheduleRepeatedTask(
            initialDelay: .nanoseconds(amount.nanoseconds / 2),
            delay: .nanoseconds(amount.nanoseconds / 2)
        ) {
            _ in
            let handler = bound.value
            guard let context = handler.context, var machine = handler.machine else { return }
            let now = NIODeadline.now()
            // Late by more than a whole period: this event loop did not run (code on it blocked,
            // as the CLI's write to a full stdout pipe does), and what the device sent meanwhile
            // may be waiting unread.
            let late = now - handler.lastPingTick > amount
            handler.lastPingTick = now
            // Or the device took some of what we wrote since the last tick and more still waits
            // for it: it reads slowly, and its PONG waits behind our data (docs/framing.md §4).
            let waiting = handler.waitingBytes(context: context)
            let tookFromBacklog = waiting.map { handler.outbound.tookFromBacklog(waiting: $0) } ?? false
            // Or no read under way: the layer above holds the device back, and the device's
            // silence (a PONG behind the data nobody reads yet) proves nothing either.
            guard handler.readingBelow, !late else {
                machine.holdingBack(now: now)
                handler.machine = machine
                return
            }
            if tookFromBacklog { machine.tookFromBacklog(now: now) }
            let actions = machine.tick(now: now, interval: amount)
            handler.machine = machine
            handler.run(actions, context: context)
            context.flush()
        }
    }

    /// Bytes written that the device has not taken yet: the channel's outbound buffer and the
    /// kernel's send queue. `nil` without a send queue to read, or on a closed channel (whose
    /// descriptor number may already name another file).
    private func waitingBytes(context: ChannelHandlerContext) -> Int? {
        guard let sendQueue = self.sendQueue, context.channel.isActive,
            let buffered = try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes),
            let queued = sendQueue.unsentBytes()
        else { return nil }
        return buffered + queued
    }

    func stopTimers() {
        self.handshakeTimer?.cancel()
        self.handshakeTimer = nil
        self.helloResendTimer?.cancel()
        self.helloResendTimer = nil
        self.pingTimer?.cancel()
        self.pingTimer = nil
    }
}
