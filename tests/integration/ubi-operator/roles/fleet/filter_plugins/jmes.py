"""`jmes`: a JMESPath query over a value, with the jmespath library the Dockerfile installs
(what community.general's json_query does)."""

import jmespath


def jmes(value, expression):
    return jmespath.search(expression, value)


class FilterModule:
    def filters(self):
        return {"jmes": jmes}
