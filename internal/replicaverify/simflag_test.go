package replicaverify

import _ "github.com/isrbench/isrbench/internal/simflag"
