package log

import "fmt"

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
	// Decide first, so that the log start hook sees the new log start before any segment goes.
	k, size := 0, l.size.Load()
	for k+1 < len(l.mu.segs) {
		s := l.mu.segs[k]
		if l.mu.segs[k+1].base > maxDeletableOffset {
			break
		}
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
		size -= s.size
		k++
	}
	if k == 0 {
		return 0, nil
	}
	if err := l.beforeLogStartLocked(max(l.logStart.Load(), l.mu.segs[k].base)); err != nil {
		return 0, err
	}
	for ; k > 0; k-- {
		s := l.mu.segs[0]
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
	return deletedSegments, l.persistLogStartLocked()
}

// SetBeforeLogStart sets fn to be called with the new log start before ApplyRetention or
// IncrementLogStart moves the log start up and deletes the segments below it (with the log's
// writer lock held: fn must not call the Log's writing methods). An error from fn stops the
// move: nothing is deleted, and the call returns it. The partition's producer state keeps
// there what the deleted batches alone told (partition's log-start snapshot).
func (l *Log) SetBeforeLogStart(fn func(newStart int64) error) {
	l.wmu.Lock()
	l.wmu.beforeLogStart = fn
	l.wmu.Unlock()
}

// beforeLogStartLocked calls the SetBeforeLogStart hook (wmu held).
func (l *Log) beforeLogStartLocked(newStart int64) error {
	if fn := l.wmu.beforeLogStart; fn != nil {
		if err := fn(newStart); err != nil {
			return fmt.Errorf("log %s: before moving the log start to %d: %w", l.dir, newStart, err)
		}
	}
	return nil
}
