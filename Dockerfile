# The seeds' operators, Echo and EchoFlask (watches.yaml, roles/, playbooks/), as an operator
# image built the way an operator-sdk project builds its own: the Dockerfile that
# `operator-sdk init --plugins ansible` scaffolds, with only the FROM line changed, on
# operator-runner's base image (images/operator-runner/Dockerfile, tagged operator-runner:latest).
#
#   make docker-build IMG=...   the base image operator-runner:latest first, then this one
#   make image                  the same without Docker (buildah on a debootstrap base)
FROM operator-runner:latest

COPY requirements.yml ${HOME}/requirements.yml
RUN ansible-galaxy collection install -r ${HOME}/requirements.yml \
 && chmod -R ug+rwx ${HOME}/.ansible

COPY watches.yaml ${HOME}/watches.yaml
COPY roles/ ${HOME}/roles/
COPY playbooks/ ${HOME}/playbooks/
