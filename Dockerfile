# The chaoskraft node image, built by `chaoskraft image build` FROM the base image it
# makes with mmdebstrap (no registry needed). BASE is passed as a build argument.
ARG BASE=chaoskraft-base:latest
FROM ${BASE}
LABEL chaoskraft=1
COPY node_image /opt/chaoskraft/node_image
COPY vendor /opt/chaoskraft/vendor
# Byte-code compiled once here: the node runs with PYTHONDONTWRITEBYTECODE, so without it every
# start (each container, each restart after a kill or power loss) compiled every module again,
# 9.5 s instead of 2 s of imports on a loaded 2-core machine.
RUN python3 -m compileall -q /opt/chaoskraft \
    && mkdir -p /run/sshd /etc/chaoskraft /var/log/chaoskraft /var/lib/chaoskraft /root/.ssh \
    && chmod 700 /root/.ssh \
    && rm -f /etc/ssh/ssh_host_* \
    && printf '#!/bin/sh\nPYTHONPATH=/opt/chaoskraft:/opt/chaoskraft/vendor exec python3 -m node_image.supervisor ctl "$@"\n' > /usr/local/bin/ck-ctl \
    && chmod +x /usr/local/bin/ck-ctl \
    && printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\n' > /etc/ssh/sshd_config.d/chaoskraft.conf
ENV PYTHONPATH=/opt/chaoskraft:/opt/chaoskraft/vendor PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
EXPOSE 9092 9093 22
CMD ["python3", "-m", "node_image.supervisor", "run"]
