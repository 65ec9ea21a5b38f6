"""The keys a Java 5.3.3 broker shows in GET_BROKER_CONFIG, with their types and defaults.

A Java broker answers ``getBrokerConfig`` with every field of its four
config objects (BrokerConfig, NettyServerConfig, NettyClientConfig,
MessageStoreConfig): 411 keys, sorted, ``null`` ones left out. This table
holds 408 of them as a 5.3.3 broker shows them by default (read from one,
the types from its fields); the other three (``storePathRootDir``,
``storePathCommitLog``, ``rocketmqHome``) and the values that depend on the
machine, the role or the stub's own settings are filled in by
:mod:`broker_stub.broker_config_admin`. A line is ``<type> <key>=<default>``,
the type one of ``i`` (int), ``l`` (long), ``b`` (boolean), ``d`` (double),
``f`` (float), ``s`` (String), ``e`` (an enum, set by name).

:func:`java_value` is how Java's ``MixAll.properties2Object`` takes a value
for such a key from the config file or UPDATE_BROKER_CONFIG: numbers with
``Integer.parseInt`` / ``Long.parseLong`` / ``Double.parseDouble`` (a value
that does not parse is silently ignored, the old one kept), booleans with
``Boolean.parseBoolean`` (anything but ``true`` is false), strings trimmed,
enums by exact name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from remoting.fastjson import java_double
from remoting.javatypes import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

_TABLE = """\
i accessMessageInMemoryHotRatio=26
i accessMessageInMemoryMaxRatio=40
b accountStatsEnable=true
b accountStatsPrintZeroValues=true
i ackMessageThreadPoolNums=16
i ackThreadPoolQueueCapacity=100000
b aclEnable=false
i adminBrokerThreadPoolNums=16
i adminBrokerThreadPoolQueueCapacity=10000
b allAckInSyncStateSet=false
b allowRecallWhenBrokerNotWriteable=true
b appendAckAsync=false
b appendCkAsync=false
b asyncLearner=false
b asyncSendEnable=true
b autoCreateSubscriptionGroup=true
b autoCreateTopicEnable=true
b autoDeleteUnusedStats=true
b autoMessageVersionOnTopicLen=true
i batchDispatchRequestThreadPoolNums=16
s bindAddress=0.0.0.0
i bitMapLengthConsumeQueueExt=112
s bottomMostCompressionTypeForConsumeQueueStore=zstd
l broadcastOffsetExpireMaxSecond=300
l broadcastOffsetExpireSecond=120
s brokerClusterName=DefaultCluster
i brokerElectionPriority=2147483647
b brokerFastFailureEnable=true
i brokerHeartbeatInterval=1000
s brokerIP1=
s brokerIP2=
l brokerId=0
s brokerName=
l brokerNotActiveTimeoutMillis=10000
i brokerPermission=6
e brokerRole=ASYNC_MASTER
b brokerTopicEnable=true
l cgColdReadThreshold=3145728
l channelExpiredTimeout=120000
l channelNotActiveInterval=60000
b checkCRCOnRecover=true
l checkSyncStateSetPeriod=5000
b cleanFileForciblyEnable=true
i cleanOfflineBrokerInterval=30000
i cleanResourceInterval=10000
l cleanRocksDBDirtyCQIntervalMin=60
l cleanSwapedMapInterval=300000
b clearRetryTopicWhenDeleteTopic=true
i clientAsyncSemaphoreValue=65535
i clientCallbackExecutorThreads=2
i clientChannelMaxIdleTimeSeconds=120
b clientCloseSocketIfTimeout=true
i clientManageThreadPoolNums=32
i clientManagerThreadPoolQueueCapacity=1000000
i clientOnewaySemaphoreValue=65535
b clientPooledByteBufAllocatorEnable=false
i clientSocketRcvBufSize=0
i clientSocketSndBufSize=0
i clientWorkerThreads=4
b clusterTopicEnable=true
b coldCtrStrategyEnable=false
b coldDataFlowControlEnable=false
b coldDataScanEnable=false
i commercialBaseCount=1
i commercialSizePerMsg=4096
i commitCommitLogLeastPages=4
i commitCommitLogThoroughInterval=200
i commitIntervalCommitLog=200
l commitLogForceSwapMapInterval=43200000
l commitLogSwapMapInterval=3600000
i commitLogSwapMapReserveFileNum=100
i compactionCqMappedFileSize=10485760
i compactionMappedFileSize=104857600
i compactionScheduleInternal=900000
i compactionThreadNum=6
b compatibleWithOldNameSrv=true
b compressedRegister=false
s configBlackList=configBlackList;brokerConfigPath
s configManagerVersion=v1
i connectTimeoutMillis=3000
l consumerFallbehindThreshold=17179869184
i consumerManageThreadPoolNums=32
i consumerManagerThreadPoolQueueCapacity=1000000
l consumerOffsetUpdateVersionStep=500
s controllerAddr=
l controllerHeartBeatTimeoutMills=10000
i correctLogicMinOffsetForceInterval=300000
i correctLogicMinOffsetSleepInterval=1
b dataReadAheadEnable=true
b debugLockEnable=false
e defaultMessageRequestMode=PULL
i defaultPopShareQueueNum=-1
i defaultQueryMaxNum=32
i defaultTopicQueueNums=8
l delayOffsetUpdateVersionStep=200
i deleteCommitLogFilesInterval=100
i deleteConsumeQueueFilesInterval=100
i deleteFileBatchMax=10
s deleteWhen=04
i destroyMapedFileIntervalForcibly=120000
b disableCallbackExecutor=false
b disableConsumeIfConsumerReadSlowly=false
b disableNettyWorkerGroup=false
i disappearTimeAfterStart=-1
b diskFallRecorded=true
i diskMaxUsedSpaceRatio=75
i diskSpaceCleanForciblyRatio=85
i diskSpaceWarningLevelRatio=90
i dispatchCqCacheNum=4096
i dispatchCqThreads=10
b dispatchFromSenderThread=false
b duplicationEnable=false
b enableAsyncReput=true
b enableAutoInSyncReplicas=false
b enableBatchPush=false
b enableBroadcastOffsetStore=true
b enableBuildConsumeQueueConcurrently=false
b enableCalcFilterBitMap=false
b enableCleanExpiredOffset=false
b enableCompaction=true
b enableConsumeQueueExt=false
b enableControllerMode=false
b enableCreateSysGroup=true
b enableDLegerCommitLog=false
b enableDetailStat=true
b enableFastChannelEventProcess=false
b enableLmq=false
b enableLmqStats=false
b enableMixedMessageType=false
b enableMultiDispatch=false
b enableNetWorkFlowControl=false
b enableNotifyAfterPopOrderLockRelease=true
b enableNotifyBeforePopCalculateLag=true
b enablePopBatchAck=false
b enablePopBufferMerge=false
b enablePopLog=false
b enablePopMessageThreshold=false
b enablePropertyFilter=false
b enableReconnectForGoAway=true
b enableRegisterProducer=true
b enableRemoteEscape=false
b enableRetryTopicV2=false
b enableRocksDBLog=false
b enableScheduleAsyncDeliver=false
b enableScheduleMessageStats=true
b enableShutdownGracefully=false
b enableSingleTopicRegister=false
b enableSkipLongAwaitingAck=false
b enableSlaveActingMaster=false
b enableSplitRegistration=false
b enabledAppendPropCRC=false
i endTransactionPoolQueueCapacity=100000
i endTransactionThreadPoolNums=12
b estimateAccumulation=true
i expectConsumerNumUseFilter=32
b fastFailIfNoBufferInStorePool=false
b fetchControllerAddrByDnsLookup=false
b fetchNameSrvAddrByDnsLookup=false
b fetchNamesrvAddrByAddressServer=false
l fetchNamesrvAddrInterval=10000
i fileReservedTime=72
l filterDataCleanTimeSpan=86400000
b filterSupportRetry=false
i flushCommitLogLeastPages=4
i flushCommitLogThoroughInterval=10000
b flushCommitLogTimed=true
i flushConsumeQueueLeastPages=2
i flushConsumeQueueThoroughInterval=60000
i flushConsumerOffsetHistoryInterval=60000
i flushConsumerOffsetInterval=5000
l flushDelayOffsetInterval=10000
e flushDiskType=ASYNC_FLUSH
i flushIntervalCommitLog=500
i flushIntervalConsumeQueue=1000
i flushLeastPagesWhenWarmMapedFile=4096
b forceRegister=true
b forceVerifyPropCRC=false
l forwardTimeout=3000
l globalColdReadThreshold=104857600
b haFlowControlEnable=false
i haHousekeepingInterval=20000
i haListenPort=10912
i haMaxGapNotInSync=268435456
l haMaxTimeSlaveNotCatchup=15000
i haSendHeartbeatInterval=5000
i haTransferBatchSize=32768
i heartbeatThreadPoolNums=2
i heartbeatThreadPoolQueueCapacity=50000
b highSpeedMode=false
i inSyncReplicas=1
b initPopOffsetByCheckMsgInMem=true
b isBrokerContainer=false
b isInBrokerContainer=false
b isScanAvailableNameSrv=true
b isolateLogEnable=false
i listenPort=10911
b litePullMessageEnable=true
i litePullMessageThreadPoolNums=20
i litePullThreadPoolQueueCapacity=100000
l loadBalancePollNameServerInterval=30000
i loadBalanceProcessorThreadPoolNums=32
i loadBalanceThreadPoolQueueCapacity=100000
b lockInStrictMode=false
l logicQueueForceSwapMapInterval=43200000
l logicQueueSwapMapInterval=3600000
i logicQueueSwapMapReserveFileNum=20
d logicalDiskSpaceCleanForciblyThreshold=0.8
b longPollingEnable=true
i mappedFileSizeCommitLog=1073741824
i mappedFileSizeConsumeQueue=6000000
i mappedFileSizeConsumeQueueExt=50331648
i mappedFileSizeTimerLog=104857600
b mappedFileSwapEnable=true
i mapperFileSizeBatchConsumeQueue=13800000
i maxAsyncPutMessageRequests=5000
i maxBatchDeleteFilesNum=50
l maxChecksumRange=1073741824
i maxConsumeQueueScan=20000
i maxErrorRateOfBloomFilter=20
i maxFilterMessageSize=16000
l maxHaTransferByteInSecond=104857600
i maxHashSlotNum=5000000
i maxIndexNum=20000000
i maxLmqConsumeQueueNum=20000
i maxMessageSize=4194304
i maxMsgsNumBatch=64
i maxOffsetMapSize=104857600
l maxPopPollingSize=100000
l maxReconnectIntervalTimeSeconds=60
i maxRecoveryCommitlogFiles=30
l maxSlaveResendLength=268435456
i maxStatsIdleTimeInMinutes=-1
i maxTopicLength=127
i maxTransferBytesOnMessageInDisk=65536
i maxTransferBytesOnMessageInMemory=262144
i maxTransferCountOnMessageInDisk=8
i maxTransferCountOnMessageInMemory=32
l memTableFlushIntervalMs=3600000
s messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
b messageIndexEnable=true
b messageIndexSafe=false
s messageStorePlugIn=
l metricGrpcExporterIntervalInMills=60000
l metricGrpcExporterTimeOutInMills=3000
l metricLoggingExporterIntervalInMills=10000
e metricsExporterType=DISABLE
s metricsGrpcExporterHeader=
s metricsGrpcExporterTarget=
b metricsInDelta=false
s metricsLabel=
i metricsOtelCardinalityLimit=50000
s metricsPromExporterHost=
i metricsPromExporterPort=5557
i minInSyncReplicas=1
s msgTraceTopicName=RMQ_SYS_TRACE_TOPIC
s namesrvAddr=
b notifyConsumerIdsChangedEnable=true
b offsetCheckInSlave=false
l osPageCacheBusyTimeOutMills=1000
i popCkMaxBufferSize=200000
i popCkOffsetMaxQueueSize=20000
i popCkStayBufferTime=10000
i popCkStayBufferTimeOut=3000
b popConsumerFSServiceInit=true
b popConsumerKVServiceEnable=false
b popConsumerKVServiceInit=false
b popConsumerKVServiceLog=false
i popFromRetryProbability=20
l popInflightMessageThreshold=10000
l popLongPollingForceNotifyInterval=800
i popPollingMapSize=100000
i popPollingSize=1024
b popResponseReturnActualRetryTopic=false
i popReviveMaxAttemptTimes=16
i popReviveMaxReturnSizePerRead=16384
b printChannelGroups=false
i printChannelGroupsMinNum=5
i processReplyMessageThreadPoolNums=20
i pullBatchMaxMessageCount=160
i pullMessageThreadPoolNums=20
i pullThreadPoolQueueCapacity=100000
b putConsumeQueueDataByFileChannel=true
i putMessageFutureThreadPoolNums=2
i putMessageTimeout=8000
i putMsgIndexHightWater=600000
i putThreadPoolQueueCapacity=10000
i queryMessageThreadPoolNums=10
i queryThreadPoolQueueCapacity=20000
b readUnCommitted=false
b realTimeNotifyConsumerChange=true
b realTimePersistRocksDBConfig=true
b recallMessageEnable=false
b recheckReputOffsetFromCq=false
b recoverConcurrently=false
i recoverThreadPoolNums=32
i redeleteHangedFileInterval=120000
s regionId=DefaultRegion
i registerBrokerTimeoutMills=24000
i registerNameServerPeriod=30000
b rejectPullConsumerEnable=false
b rejectTransactionMessage=false
i replicasPerDiskPartition=1
i replyThreadPoolQueueCapacity=10000
b retrieveMessageFromPopRetryTopicV1=true
l reviveAckWaitMs=180000
l reviveInterval=1000
l reviveMaxSlow=3
i reviveQueueNum=8
l reviveScanTime=10000
b rocksdbCQDoubleWriteEnable=false
s rocksdbCompressionType=lz4
i rocksdbFlushWalFrequency=1024
l rocksdbWalFileRollingThreshold=1073741824
i sampleCountThreshold=5000
i sampleSteps=32
i scheduleAsyncDeliverMaxPendingLimit=2000
i scheduleAsyncDeliverMaxResendNum2Blocked=3
b searchBcqByCacheEnable=true
i sendHeartbeatTimeoutMillis=1000
i sendMessageThreadPoolNums=2
i sendThreadPoolQueueCapacity=10000
i serverAsyncSemaphoreValue=64
i serverCallbackExecutorThreads=0
i serverChannelMaxIdleTimeSeconds=120
b serverLoadBalancerEnable=true
b serverNettyWorkerGroupEnable=true
i serverOnewaySemaphoreValue=256
b serverPooledByteBufAllocatorEnable=true
i serverSelectorThreads=3
i serverSocketBacklog=1024
i serverSocketRcvBufSize=0
i serverSocketSndBufSize=0
i serverWorkerThreads=8
l shortPollingTimeMills=1000
i shutdownWaitTimeSeconds=30
b skipPreOnline=false
b skipWhenCKRePutReachMaxTimes=false
b slaveReadEnable=false
i slaveTimeout=3000
s socksProxyConfig={}
i spinLockCollisionRetreatOptimalDegree=1000
i splitRegistrationSize=800
l startAcceptSendRequestTimeStamp=0
l statRocksDBCQIntervalSec=10
b storeReplyMessageEnable=true
s storeType=default
l subscriptionExpiredTimeout=600000
i syncBrokerMemberGroupPeriod=1000
l syncBrokerMetadataPeriod=5000
l syncControllerMetadataPeriod=10000
i syncFlushTimeout=5000
b syncFromLastFile=false
b syncMasterFlushOffsetWhenStartup=false
s timerCheckMetricsWhen=05
i timerColdDataCheckIntervalMs=60000
i timerCongestNumEachSlot=2147483647
b timerEnableCheckMetrics=true
b timerEnableDisruptor=false
b timerEnableRetryUntilSuccess=false
i timerFlushIntervalMs=1000
i timerGetMessageThreadNum=3
b timerInterceptDelayLevel=false
i timerMaxDelaySec=259200
i timerMetricSmallThreshold=1000000
i timerPrecisionMs=1000
i timerProgressLogIntervalMs=10000
i timerPutMessageThreadNum=3
i timerRollWindowSlot=172800
b timerSkipUnknownError=false
b timerStopDequeue=false
b timerStopEnqueue=false
b timerWarmEnable=false
b timerWheelEnable=true
i topicQueueLockNum=32
i totalReplicas=1
b traceOn=true
b traceTopicEnable=false
l transactionCheckInterval=30000
i transactionCheckMax=15
l transactionMetricFlushInterval=3000
i transactionOpBatchInterval=3000
i transactionOpMsgMaxSize=4096
l transactionTimeOut=6000
b transferMsgByHeap=true
b transientStorePoolEnable=false
i transientStorePoolSize=5
i travelCqFileNumWhenGetMessage=1
i updateNameServerAddrPeriod=120000
b useABSLock=false
b useEpollNativeSelector=false
b usePIDColdCtrStrategy=true
b useReentrantLockWhenPutMessage=true
b useServerSideResetOffset=true
b useStaticSubscription=false
b useTLS=false
b validateSystemTopicWhenUpdateTopic=true
l waitTimeMillsInAckQueue=3000
l waitTimeMillsInAdminBrokerQueue=5000
l waitTimeMillsInHeartbeatQueue=31000
l waitTimeMillsInLitePullQueue=5000
l waitTimeMillsInPullQueue=5000
l waitTimeMillsInSendQueue=200
l waitTimeMillsInTransactionQueue=3000
b wakeCommitWhenPutMessage=true
b wakeFlushWhenPutMessage=false
b warmMapedFileEnable=false
i writeBufferHighWaterMark=0
i writeBufferLowWaterMark=0
"""

#: key -> (type letter, default text), in Java's (sorted) order.
JAVA_KEYS: dict[str, tuple[str, str]] = {}
for _line in _TABLE.splitlines():
    _kind, _, _pair = _line.partition(" ")
    _key, _, _default = _pair.partition("=")
    JAVA_KEYS[_key] = (_kind, _default)

#: Java keys whose default is null (left out of GET_BROKER_CONFIG until set); plain strings.
NULL_BY_DEFAULT = frozenset({"rocketmqHome", "storePathCommitLog"})
#: Keys the stub derives from its own state (brokerRole from brokerId): not settable.
DERIVED = frozenset({"brokerRole"})

#: The names each enum key takes (BrokerRole, FlushDiskType, MessageRequestMode, MetricsExporterType).
ENUM_NAMES = {
    "brokerRole": frozenset({"ASYNC_MASTER", "SYNC_MASTER", "SLAVE"}),
    "flushDiskType": frozenset({"SYNC_FLUSH", "ASYNC_FLUSH"}),
    "defaultMessageRequestMode": frozenset({"PULL", "POP"}),
    "metricsExporterType": frozenset({"DISABLE", "OTLP_GRPC", "PROM", "LOG"}),
}
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?\Z")


def java_value(key: str, text: str) -> str | None:
    """The value Java would keep for ``key`` given ``text`` (as it then shows it), or None when
    Java ignores it (a number that does not parse, an unknown enum name, a key it does not have)."""
    entry = JAVA_KEYS.get(key)
    if entry is None:
        return text.strip() if key in NULL_BY_DEFAULT else None
    kind = entry[0]
    if kind in ("i", "l"):
        if not _INTEGER.match(text):  # parseInt/parseLong: no blanks, no "1_000", no decimals
            return None
        value = int(text)
        low, high = (INT32_MIN, INT32_MAX) if kind == "i" else (INT64_MIN, INT64_MAX)
        return str(value) if low <= value <= high else None
    if kind == "b":
        return "true" if text.lower() == "true" else "false"
    if kind in ("d", "f"):
        stripped = text.strip()  # Double.parseDouble trims
        if not _DOUBLE.match(stripped):
            return None
        return java_double(float(stripped.rstrip("fFdD")))
    if kind == "e":
        return text if text in ENUM_NAMES.get(key, ()) else None
    return text.strip()


def java_settings(props: Mapping[str, str], own: Collection[str]) -> dict[str, str]:
    """The Java keys of ``props`` the stub only keeps and shows (not its ``own``, not derived ones),
    each as Java would take it; the rest is ignored, as a Java broker ignores keys it does not have."""
    out: dict[str, str] = {}
    for key, text in props.items():
        if key in own or key in DERIVED:
            continue
        value = java_value(key, text)
        if value is not None:
            out[key] = value
    return out


__all__ = ["DERIVED", "ENUM_NAMES", "JAVA_KEYS", "NULL_BY_DEFAULT", "java_settings", "java_value"]
