// Interop check with the Apache RocketMQ C++ client (rocketmq-client-cpp, built from source by
// cpp_check.sh) against mqnamesrv + mqbroker-stub.
//
// usage: cpp_check NAMESRV_ADDR TOPIC
//
// A DefaultMQProducer sends 3 TagA and 3 TagB messages to TOPIC (unknown to the NameServer at first:
// the client falls back to TBW102 and the broker auto-creates the topic); each SendResult must be
// SEND_OK. A DefaultMQPushConsumer subscribed to "TagA" (CONSUME_FROM_FIRST_OFFSET) must receive
// exactly the TagA messages. Prints one JSON line per event and a summary; exit 0 only if all held.
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "DefaultMQProducer.h"
#include "DefaultMQPushConsumer.h"

using namespace rocketmq;

static std::mutex g_mtx;
static std::multiset<std::string> g_received;

static void emit(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mtx);
  std::cout << line << std::endl;
}

class Listener : public MessageListenerConcurrently {
 public:
  ConsumeStatus consumeMessage(const std::vector<MQMessageExt>& msgs) override {
    for (const auto& m : msgs) {
      std::ostringstream out;
      out << "{\"event\":\"received\",\"body\":\"" << m.getBody() << "\",\"tags\":\"" << m.getTags()
          << "\",\"msgId\":\"" << m.getMsgId() << "\",\"offsetMsgId\":\"" << m.getOffsetMsgId()
          << "\",\"queueId\":" << m.getQueueId() << ",\"queueOffset\":" << m.getQueueOffset() << "}";
      emit(out.str());
      std::lock_guard<std::mutex> lock(g_mtx);
      g_received.insert(m.getBody());
    }
    return CONSUME_SUCCESS;
  }
};

int main(int argc, char* argv[]) {
  if (argc != 3) {
    std::cerr << "usage: cpp_check NAMESRV_ADDR TOPIC" << std::endl;
    return 2;
  }
  const std::string nameSrv = argv[1], topic = argv[2];
  DefaultMQProducer producer("PG_CPP_INTEROP");
  producer.setNamesrvAddr(nameSrv);
  producer.setSendMsgTimeout(3000);
  producer.setTcpTransportConnectTimeout(1000);
  producer.start();

  int sendOk = 0, sent = 0;
  for (int i = 0; i < 3; i++) {
    for (const char* prefix : {"a", "b"}) {
      std::string body = std::string(prefix) + "-" + std::to_string(i);
      MQMessage msg(topic, prefix[0] == 'a' ? "TagA" : "TagB", body);
      msg.setKeys("key-" + body);
      try {
        SendResult r = producer.send(msg);
        sent++;
        if (r.getSendStatus() == SEND_OK) sendOk++;
        std::ostringstream out;
        out << "{\"event\":\"sent\",\"body\":\"" << body << "\",\"sendStatus\":\""
            << (r.getSendStatus() == SEND_OK ? "SEND_OK" : "NOT_OK") << "\",\"msgId\":\"" << r.getMsgId()
            << "\",\"offsetMsgId\":\"" << r.getOffsetMsgId() << "\",\"queueId\":" << r.getMessageQueue().getQueueId()
            << ",\"queueOffset\":" << r.getQueueOffset() << ",\"regionId\":\"" << r.getRegionId() << "\"}";
        emit(out.str());
      } catch (const MQException& e) {
        sent++;
        emit(std::string("{\"event\":\"send failed\",\"body\":\"") + body + "\",\"error\":\"" + e.what() + "\"}");
      }
    }
  }

  DefaultMQPushConsumer consumer("CG_CPP_INTEROP");
  consumer.setNamesrvAddr(nameSrv);
  consumer.setConsumeFromWhere(CONSUME_FROM_FIRST_OFFSET);
  consumer.subscribe(topic, "TagA");
  Listener listener;
  consumer.registerMessageListener(&listener);
  consumer.start();

  const std::multiset<std::string> want = {"a-0", "a-1", "a-2"};
  for (int i = 0; i < 300; i++) {  // at most 30 s
    {
      std::lock_guard<std::mutex> lock(g_mtx);
      if (g_received == want) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // a TagB message would show up now
  bool ok;
  std::string got;
  {
    std::lock_guard<std::mutex> lock(g_mtx);
    ok = sendOk == 6 && g_received == want;
    for (const auto& b : g_received) got += (got.empty() ? "\"" : ",\"") + b + "\"";
  }
  emit("{\"event\":\"summary\",\"ok\":" + std::string(ok ? "true" : "false") + ",\"sent\":" + std::to_string(sent) +
       ",\"sendOk\":" + std::to_string(sendOk) + ",\"received\":[" + got + "]}");
  consumer.shutdown();
  producer.shutdown();
  return ok ? 0 : 1;
}
