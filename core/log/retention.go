package log

// ApplyRetention deletes the oldest segments while retention.bytes or retention.ms is breached
// (Kafka's rules: delete while Size()-segment size >= retention.bytes; or now - the segment's
// largest timestamp (file mtime if it has none) > retention.ms). It never deletes the active
// segment, nor a segment holding offsets >= maxDeletableOffset (the high watermark): a segment
// is deletable only when the next segment's base offset <= maxDeletableOffset. It stops at the
// first segment it keeps and returns how many it deleted.
func (l *Log) ApplyRetention(nowMs int64, maxDeletableOffset int64) (deletedSegments int, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	rb, rms := l.cfg.RetentionBytes, l.cfg.RetentionMs
	if rb < 0 && rms < 0 {
		return 0, nil
	}
	for len(l.mu.segs) > 1 {
		s := l.mu.segs[0]
		if l.mu.segs[1].base > maxDeletableOffset {
			break
		}
		size := l.size.Load()
		bySize := rb >= 0 && size-s.size >= rb
		byTime := false
		if rms >= 0 {
			ts := s.maxTs
			if ts < 0 {
				if st, err := l.fs.Stat(s.logPath); err == nil {
					ts = st.ModTime().UnixMilli()
				}
			}
			byTime = ts >= 0 && nowMs-ts > rms
		}
		if !bySize && !byTime {
			break
		}
		l.mu.Lock()
		l.mu.segs[0] = nil
		l.mu.segs = l.mu.segs[1:]
		l.logStart.Store(max(l.logStart.Load(), l.mu.segs[0].base))
		l.mu.Unlock()
		l.size.Add(-s.size)
		if err := s.remove(l.fs); err != nil {
			return deletedSegments, l.poison("retention delete", err)
		}
		deletedSegments++
	}
	if deletedSegments > 0 {
		return deletedSegments, l.persistLogStartLocked()
	}
	return deletedSegments, nil
}
