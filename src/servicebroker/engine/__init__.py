"""The engine: one broker's Service Broker statements and their commit — the transaction and
its statements, RECEIVE and the conversation-group locks, the commit's delivery, the
transmission queue, waiting, the timer, stream readers' claims, and what operators read
(statistics, operations). It reads the catalog and storage below it and reports through the
``BrokerEvents`` seam (:mod:`.context`) that the activation layer implements above it."""
