package broker

// FetcherLag is one followed partition's lag as Kafka's follower reports it
// (kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=ReplicaFetcherThread-<Fetcher>-<Source>,
// topic=..,partition=..): the leader's HW in the last fetch response applied minus the
// replica's LEO, at least 0 (AbstractFetcherThread: max(0, highWatermark - nextOffset)).
type FetcherLag struct {
	Topic     string
	Partition int32
	Source    int32 // the leader fetched from
	Fetcher   int   // the fetcher's index among num.replica.fetchers
	Lag       int64 // records
}

// FetcherLags returns the lag of every partition the broker's replica fetchers follow and
// have had a fetch response for, ordered by fetcher and partition. Safe for concurrent use.
func (b *Broker) FetcherLags() []FetcherLag {
	var out []FetcherLag
	for _, f := range b.Fetchers() {
		f.mu.Lock()
		for _, k := range f.mu.order {
			fp := f.mu.parts[k]
			if fp.leaderHW < 0 {
				continue // no response yet: Kafka has no lag for it either
			}
			out = append(out, FetcherLag{Topic: k.topic, Partition: k.partition, Source: f.key.source, Fetcher: f.key.index,
				Lag: max(0, fp.leaderHW-fp.h.r.LEO())})
		}
		f.mu.Unlock()
	}
	return out
}
